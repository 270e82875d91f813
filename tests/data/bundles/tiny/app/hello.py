print("hello from the tiny app")
