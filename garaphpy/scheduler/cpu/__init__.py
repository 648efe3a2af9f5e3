"""The CPU engine's parts (Garaph section 4): :mod:`.engine` puts them together."""
