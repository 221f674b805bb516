"""ksqlDB compatibility cases, one module per capability; run by ``tests/test_ksqldb.py``."""
