"""Serving a class from one process: fair shares of CPU and the server's tuning."""
