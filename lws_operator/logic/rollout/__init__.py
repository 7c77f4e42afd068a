"""Rolling updates: partition and replica pacing, the progress deadline, stalls."""
