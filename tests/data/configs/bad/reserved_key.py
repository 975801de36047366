# mmcv's Config reserves filename, text and pretty_text
filename = 'stream_petr.py'
