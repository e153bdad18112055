"""Project manifests: the schema, and drafting one from a repository."""
