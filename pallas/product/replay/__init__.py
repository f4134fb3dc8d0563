"""The replay: a chat's recorded window run through the gate under the settings of the day or
proposed ones, sending nothing and calling no model (docs/cost.md, "The replay")."""
