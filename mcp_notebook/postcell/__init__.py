"""The post-cell diff engine: what a cell changed in the namespace (nswatch.py), read from the dict's
own slot table (dict_table.py), the listing way as bytes (nsdiff.py)."""
