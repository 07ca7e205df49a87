"""Drive service-time models (HDD, SSD) over parameter vectors."""
