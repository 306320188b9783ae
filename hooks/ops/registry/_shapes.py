"""Shape arithmetic shared by fakes of several families."""



def _round_up(x, m):
    return (x + m - 1) // m * m
