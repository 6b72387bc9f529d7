"""nanochat: chat rendering, the KV-cache engine, the backend, the terminal chat and the web UI."""
