"""A 2AFC study a whole class can run: triplets, who is who, their storage, what is shown, and the scoring (no Streamlit).

- :mod:`~lpips_explorer.study.triplets`: a reference patch and two distorted copies, kept as a
  JSON recipe that regenerates the same pixels;
- :mod:`~lpips_explorer.study.prepare`: everything a study's triplets need (the PNGs shown and
  every metric's values on those pixels), computed once when the study is created;
- :mod:`~lpips_explorer.study.store`: the SQLAlchemy schema and repository (SQLite in WAL mode by
  default, PostgreSQL by URL), with a schema version and its upgrade steps, bounded lock waits,
  the lecturer's key (hashed), release and close;
- :mod:`~lpips_explorer.study.access`: participant tokens, their anonymous ids, the admin key;
- :mod:`~lpips_explorer.study.present`: the triplet's HTML (nearest-neighbour, fitted to its
  column), links, the QR code, the texts and tables around the results;
- :mod:`~lpips_explorer.study.scoring`: BAPPS' 2AFC score, the human ceiling, seeded bootstrap
  intervals, and :func:`~lpips_explorer.study.scoring.summarize` for a whole study.

The chart of the class result is :func:`lpips_explorer.figures.study.agreement_chart`.
"""
