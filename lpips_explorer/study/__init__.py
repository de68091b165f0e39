"""A 2AFC study a whole class can run: triplet recipes, their storage and their scoring (no Streamlit).

- :mod:`~lpips_explorer.study.triplets`: a reference patch and two distorted copies, kept as a
  JSON recipe that regenerates the same pixels;
- :mod:`~lpips_explorer.study.store`: the SQLAlchemy schema and repository (any Engine; SQLite in
  WAL mode by default), with a schema version and its upgrade steps;
- :mod:`~lpips_explorer.study.scoring`: BAPPS' 2AFC score, the human ceiling, seeded bootstrap
  intervals, and :func:`~lpips_explorer.study.scoring.summarise` for a whole study.
"""
