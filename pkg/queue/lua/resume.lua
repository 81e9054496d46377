-- resume.lua: unpause a queue and wake idle workers.
-- Returns 1 when the queue was paused, else 0.
local was = redis.call('DEL', K_PAUSED)
signal(redis.call('LLEN', K_HIGH) + redis.call('LLEN', K_NORMAL) + redis.call('LLEN', K_LOW))
return was
