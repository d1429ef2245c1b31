"""The history room of the providers: what each cell changed and each variable's history
(lineage.py), source and namespace diffs (diffs.py), earlier sessions from IPython's history
(sessions.py)."""
