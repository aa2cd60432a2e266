"""What the stream tells the people who run it: its Prometheus metrics (metrics), the thread that
measures latency and backlog and writes the health record the Stream page reads (health_sampler),
and the progress summary of a catch-up run (progress)."""
