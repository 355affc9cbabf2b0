"""Data-parallel PyTorch trainer: one code path for 1 replica or 1 chief + N workers."""
