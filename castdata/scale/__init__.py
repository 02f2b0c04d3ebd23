"""Scale-out: collection as work units on a Ray cluster (see `ray_executor`)."""
