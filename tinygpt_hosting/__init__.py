"""The hosting wing: what a server for a whole class adds to the app, one subpackage per concern.

- `classroom/`: the live class (teacher, students, rounds, lessons), plugged into every page.
- `serving/`: fair shares of CPU, the door on new sessions, the server's tuning.
- `steps/`: generation steps shared by many students (NumPy only, no Streamlit).
- `streamlit_internals`: everything used of Streamlit beyond its public API, each use guarded.
"""
