"""Native parts of the framework adapters (sources built on first use) and their build."""
