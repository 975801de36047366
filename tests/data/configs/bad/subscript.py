optimizer = dict(type='AdamW', lr=2e-4)
lr = optimizer['lr']
