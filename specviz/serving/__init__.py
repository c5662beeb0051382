"""Serving the app's visitors without streamlit: background jobs and the process-wide registry of loaded pairs.
May import: specviz.runs and everything below it.
"""
