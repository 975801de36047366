cfg = dict([('type', 'AdamW')])
