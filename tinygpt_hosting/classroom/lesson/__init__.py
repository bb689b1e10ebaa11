"""Lessons a teacher prepares: lesson files (loader), running one in a live class (runner), the
room against the model at each reveal (reveal), and the class report (report). docs/lessons.md."""
