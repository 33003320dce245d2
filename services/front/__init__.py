"""``kubelite front``: one TCP address before several apiservers (``service.FrontService``)."""
