"""The tables room of the providers: pages and schemas of any table (provider.py, pages.py,
schema.py, query.py, order.py), one adapter per family of libraries (tables/), the lazy engines
(engines.py) and DuckDB connections (databases.py). Entered only for values of the types it serves
(``FramesProvider.rows_serve``): an int's read never imports or calls it."""
