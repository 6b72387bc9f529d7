"""The conformance suite: one op catalogue checked against numpy on every stage that imports.

Run it with `python -m pytest conformance [--stage stage1_ndarray]`; print its coverage with
`python -m conformance.report`.
"""
