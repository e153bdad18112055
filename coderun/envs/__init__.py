"""Environment builders: a venv per project (local) or a Docker image per project (docker)."""
