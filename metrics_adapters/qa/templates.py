"""Prompt templates for question generation (in-context examples written for ts2).

Both templates end with ``Description: {prompt}`` and are completed by a language model; the
output formats are what :mod:`.generation` parses strictly. ``{prompt}`` is substituted with
``str.replace`` (the examples may contain braces).

TIFA style (TIFA section 3.1): elements with a category, then for each element a yes/no question
(answer yes) and, where the element can be an answer, a multiple-choice question whose answer is
the element::

    About <element> (<category>):
    Q: <question>
    Choices: <choice>, <choice>[, ...]
    A: <answer>

DSG style (Davidsonian scene graph): one atomic requirement per line, a yes/no question for it,
and the requirements it depends on (``0`` = none), so the questions form a DAG::

    <id> | <category> - <subcategory> (<args>) | <question> | <parent ids, comma-separated, or 0>
"""

from __future__ import annotations

__all__ = ["TIFA_TEMPLATE", "DSG_TEMPLATE", "TEMPLATES", "TIFA_CATEGORIES"]

TIFA_CATEGORIES = ("object", "human", "animal", "food", "activity", "attribute", "counting", "color", "material",
                   "spatial", "location", "shape", "other")

TIFA_TEMPLATE = """Given an image description, list its elements and the category of each (object, human, animal, food, activity, attribute, counting, color, material, spatial, location, shape, other). For each element write a yes/no question whose answer is yes for a faithful image and, where the element can be an answer, a multiple-choice question whose answer is the element. Follow the format of the examples exactly.

Description: A photo of three dogs.
About photo (other):
Q: is this a photo?
Choices: yes, no
A: yes
About three (counting):
Q: are there three dogs?
Choices: yes, no
A: yes
Q: how many dogs are there?
Choices: 1, 2, 3, 4
A: 3
About dogs (animal):
Q: are there dogs?
Choices: yes, no
A: yes
Q: what animals are in the picture?
Choices: dogs, cats, birds, horses
A: dogs

Description: A red bicycle leaning against a brick wall.
About bicycle (object):
Q: is there a bicycle?
Choices: yes, no
A: yes
Q: what vehicle is in the picture?
Choices: bicycle, motorcycle, car, scooter
A: bicycle
About red (color):
Q: is the bicycle red?
Choices: yes, no
A: yes
Q: what color is the bicycle?
Choices: red, blue, green, black
A: red
About leaning against (spatial):
Q: is the bicycle leaning against the wall?
Choices: yes, no
A: yes
About brick (material):
Q: is the wall made of brick?
Choices: yes, no
A: yes
Q: what is the wall made of?
Choices: brick, wood, glass, metal
A: brick
About wall (object):
Q: is there a wall?
Choices: yes, no
A: yes

Description: A woman eating a sandwich on a park bench.
About woman (human):
Q: is there a woman?
Choices: yes, no
A: yes
Q: who is eating a sandwich?
Choices: woman, man, girl, boy
A: woman
About eating (activity):
Q: is the woman eating?
Choices: yes, no
A: yes
Q: what is the woman doing?
Choices: eating, reading, sleeping, running
A: eating
About sandwich (food):
Q: is there a sandwich?
Choices: yes, no
A: yes
Q: what is the woman eating?
Choices: sandwich, pizza, apple, ice cream
A: sandwich
About park bench (location):
Q: is the woman on a park bench?
Choices: yes, no
A: yes
Q: where is the woman sitting?
Choices: park bench, chair, sofa, floor
A: park bench

Description: {prompt}
"""

DSG_TEMPLATE = """Given an image description, break it into atomic requirements: entities, their attributes, counts and the relations between them. For each requirement write one line with its id, its tuple, a yes/no question whose answer is yes for a faithful image, and the ids of the requirements it depends on (0 if none). A requirement about an entity depends on that entity. Follow the format of the examples exactly and stop after the last requirement.

Description: A blue motorcycle parked by paint chipped doors.
1 | entity - whole (motorcycle) | Is there a motorcycle? | 0
2 | entity - whole (doors) | Are there doors? | 0
3 | attribute - color (motorcycle, blue) | Is the motorcycle blue? | 1
4 | attribute - state (doors, paint chipped) | Are the doors paint chipped? | 2
5 | relation - spatial (motorcycle, doors, parked by) | Is the motorcycle parked by the doors? | 1,2

Description: Two cats sleeping on a green sofa.
1 | entity - whole (cats) | Are there cats? | 0
2 | other - count (cats, ==2) | Are there two cats? | 1
3 | entity - whole (sofa) | Is there a sofa? | 0
4 | attribute - color (sofa, green) | Is the sofa green? | 3
5 | action - (cats, sleep) | Are the cats sleeping? | 1
6 | relation - spatial (cats, sofa, on) | Are the cats on the sofa? | 1,3

Description: A chef in a white hat cutting vegetables.
1 | entity - whole (chef) | Is there a chef? | 0
2 | entity - whole (hat) | Is there a hat? | 0
3 | attribute - color (hat, white) | Is the hat white? | 2
4 | relation - spatial (chef, hat, wear) | Is the chef wearing the hat? | 1,2
5 | entity - whole (vegetables) | Are there vegetables? | 0
6 | action - (chef, vegetables, cut) | Is the chef cutting the vegetables? | 1,5

Description: {prompt}
"""

TEMPLATES = {"tifa": TIFA_TEMPLATE, "dsg": DSG_TEMPLATE}
