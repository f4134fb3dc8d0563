"""NoneBot plugins: thin glue from NoneBot events and routes to pallas."""
