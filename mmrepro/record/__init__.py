"""What a run leaves behind to be compared: weights digests (:mod:`.weights`)."""
