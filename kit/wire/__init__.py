"""The wire between the harness and an engine program: the frame protocol, the run's secret that
every connection presents (auth), the feed (driver) client and the sink client.

Engine-neutral and light (standard library and pyarrow only), so every engine's runtime can ship
it to its workers; the harness holds the server sides (harness/playback.py, harness/sink.py).
"""
