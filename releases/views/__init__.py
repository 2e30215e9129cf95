"""Pages that compose the three apps (the service page, home), and the releases' own."""
