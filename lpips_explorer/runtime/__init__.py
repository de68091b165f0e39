"""The server's plumbing, apart from the lessons: what the app needs to serve many sessions at once.

- ``scratch``: each session's scratch folders on disk, within a byte budget, swept when sessions end;
- ``jobs``: the slots that bound how many heavy jobs (scoring a dataset, the loss experiments) run at once;
- ``memory``: the after-run housekeeping (freezing long-lived objects, returning freed memory to the system).

Nothing here imports Streamlit: ``ui/`` wraps these modules for the pages. Import each module by
its own name (``from lpips_explorer.runtime.jobs import JobsBusy``); this package re-exports nothing.
"""
