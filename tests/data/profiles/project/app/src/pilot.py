print("pilot")
