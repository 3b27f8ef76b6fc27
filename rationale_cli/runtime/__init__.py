"""The ground floor: errors a user can cause, atomic files, locks, devices, the allocator,
JSON that never holds NaN. Imports nothing else of the toolkit."""
