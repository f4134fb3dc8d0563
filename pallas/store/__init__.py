"""The one SQLAlchemy store: engine, models, migrations and writers."""
