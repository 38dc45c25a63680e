"""Exact resume: safe checkpoint loading, the checkpoint's ``mmrepro`` section and its parts."""
