"""Indexes map incoming record keys to the file groups that hold them."""
