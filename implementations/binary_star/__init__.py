"""Binary Star (ZeroMQ guide, chapter 4): a primary/backup pair of echo servers that
publish their state to each other and fail over on a client's vote (see server.py)."""
