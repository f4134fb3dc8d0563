"""OneBot v11 (NapCat) boundary."""

PLATFORM = "qq"
