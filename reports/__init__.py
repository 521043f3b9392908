"""The report pipeline on PySpark: history -> checks -> metrics -> verdict, JUnit, HTML; and,
across runs, the results store, the matrix and baselines."""
