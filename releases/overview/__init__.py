"""Pages that look across the rooms: home (what needs me), the service catalog
and the service page. Nothing below imports them."""
