"""What a declaration alone cannot give Dynamo, one mechanism per module."""
