"""The Training page's job: a child process that trains, and its worker."""
