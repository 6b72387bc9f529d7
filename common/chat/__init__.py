"""nanochat: chat rendering, the KV-cache engine, the backend, the terminal chat and the web UI.

Nothing is imported here, so that ``python -m common.chat.engine --bench`` (decode speed with and
without the KV cache) runs its module once; import ``common.chat.engine.Engine`` and
``common.chat.calculator.evaluate`` directly.
"""
