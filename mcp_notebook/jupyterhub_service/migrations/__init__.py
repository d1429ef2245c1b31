"""Alembic's migrations of the service's store (database.py runs them at start)."""
