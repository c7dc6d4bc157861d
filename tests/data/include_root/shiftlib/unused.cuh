// No op includes this: changing it changes no kernel hash.
#pragma once
