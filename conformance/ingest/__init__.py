"""Outside data: arrays dumped by a device or a framework (``.npy``/``.npz``)."""
