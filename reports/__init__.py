"""The report pipeline on PySpark: history -> checkers -> metrics -> verdict, JUnit, HTML."""
