"""Drug identity and recall scope: the one home for "is this the same medicine, lot and product?".

Below memory, recalls, patients and corrections: it imports none of them.
"""
