"""The write path: preparing records, tagging, bucket assignment, file handles and commits."""
